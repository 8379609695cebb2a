"""Settings of long propensity computations that a command chooses and the policies read: how many threads compute
independent per-query tables, and whom to tell of their progress (context variables: a thread or task that sets
them affects itself only). Kept apart from :mod:`simulations.policies.base`, which re-exports them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["PROPENSITY_PROGRESS", "PROPENSITY_THREADS", "propensity_settings"]

#: a reporter of long propensity computations, called ``(what, done, total)`` after each unit of work (a query's
#: Plackett-Luce item marginals); set by a command that shows progress (``onlineeval estimate``), ``None`` (silent)
#: otherwise. A context variable: a thread or task that sets it affects itself only.
PROPENSITY_PROGRESS: ContextVar[Callable[[str, int, int], None] | None] = ContextVar("propensity_progress",
                                                                                   default=None)

#: threads for independent per-query propensity work (Plackett-Luce quadrature tables, compiled without the GIL):
#: 1 by default (the simulator runs one process per core); ``onlineeval estimate`` sets the machine's cores. The
#: numbers do not depend on it (each query's table is computed alone, the same arithmetic).
PROPENSITY_THREADS: ContextVar[int] = ContextVar("propensity_threads", default=1)



@contextlib.contextmanager
def propensity_settings(threads: int, progress: Callable[[str, int, int], None] | None = None) -> Iterator[None]:
    """:data:`PROPENSITY_THREADS` and :data:`PROPENSITY_PROGRESS` set for the ``with`` block (a command's own
    settings: ``onlineeval estimate`` and the Python API's ``estimate``), restored after it."""
    threads_token, progress_token = PROPENSITY_THREADS.set(int(threads)), PROPENSITY_PROGRESS.set(progress)
    try:
        yield
    finally:
        PROPENSITY_PROGRESS.reset(progress_token)
        PROPENSITY_THREADS.reset(threads_token)
