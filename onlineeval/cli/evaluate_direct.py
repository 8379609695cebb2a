"""The direct path of ``onlineeval evaluate``: plain options parsed without typer's app.

:func:`run_direct` (called by :func:`onlineeval.cli.main`) hands :func:`evaluate_cmd` the
parameters typer would, for the common case of plain options, and skips building the whole
typer app; anything unusual goes through typer, which then parses and reports it.
"""

from __future__ import annotations

from typing import Any

from onlineeval.cli._argv import Option, parse_options
from onlineeval.errors import MAX_RESAMPLES

__all__ = ["direct_params", "run_direct"]


def _table(*rows: tuple[tuple[str, ...], Option]) -> dict[str, Option]:
    return {name: spec for names, spec in rows for name in names}


#: option name -> how :func:`direct_params` parses it: :func:`evaluate_cmd`'s declarations, written out so that
#: the direct path needs no typer (tests check it equals ``_direct.direct_options(evaluate_cmd)``, field by field)
_DIRECT_OPTIONS: dict[str, Option] = _table(
    (("--qrels", "-q"), Option("qrels", "path")),
    (("--run", "-r"), Option("run", "path", multiple=True)),
    (("--letor",), Option("letor", "path")),
    (("--scores",), Option("scores", "path", multiple=True)),
    (("--score-feature",), Option("score_feature", "int", multiple=True, low=1)),
    (("--query-file",), Option("query_file", "path")),
    (("--metrics", "-m"), Option("metrics", "str", default="nDCG@10,AP,RR,P@10")),
    (("--baseline", "-b"), Option("baseline", "str")),
    (("--preset",), Option("preset_name", "str")),
    (("--gain",), Option("gain", "str")),
    (("--ties",), Option("ties", "str")),
    (("--empty",), Option("empty", "str")),
    (("--missing",), Option("missing", "str")),
    (("--rel-min",), Option("rel_min", "int")),
    (("--depth",), Option("depth", "int", low=1)),
    (("--per-query",), Option("per_query", "path")),
    (("--with-per-query",), Option("with_per_query", "flag", default=False)),
    (("--segments",), Option("segments", "path")),
    (("--format", "-f"), Option("output_format", "str", default="table")),
    (("--comparisons",), Option("comparisons_file", "path")),
    (("--seed",), Option("seed", "int", default=0, low=0)),
    (("--permutations",), Option("permutations", "int", default=10_000, low=1, high=MAX_RESAMPLES)),
    (("--bootstrap",), Option("bootstrap", "int", default=10_000, low=100, high=MAX_RESAMPLES)),
    (("--alpha",), Option("alpha", "float", default=0.05, low=0.0, high=1.0)),
)


def direct_params(args: list[str]) -> dict[str, Any] | None:
    """Parameters of :func:`evaluate_cmd` from plain ``evaluate`` arguments, exactly as typer
    would pass them, or ``None`` for anything else (help, an unknown, repeated or malformed option,
    a value out of range; :func:`onlineeval.cli._argv.parse_options`): typer then parses, and
    reports errors, itself."""
    return parse_options(_DIRECT_OPTIONS, args)


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
