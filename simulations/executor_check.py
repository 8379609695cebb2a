"""The sweep backend checked before anything runs: the scheduler spec read and a backend that cannot start refused.

:func:`check_executor` refuses, before a sweep creates anything, the backend :func:`simulations.executors.make_executor`
would fail to start: a malformed ``local:N`` or ``executor`` block, Dask distributed not importable, a TCP scheduler
address that refuses connections. :func:`parse_scheduler` reads a scheduler spec (``local:N`` or an address). An
error in a scheduler given as an argument (``--scheduler``) points at :data:`SCHEDULER`, one in the sweep file's
``executor`` block at its key (:data:`ADDRESS` for the address). The executors (:mod:`simulations.executors`) read
the same spec with these functions when they start, so the check and the start agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from onlineeval.errors import ConfigError

__all__ = [
    "ADDRESS",
    "PROBE_TIMEOUT",
    "SCHEDULER",
    "check_executor",
    "parse_scheduler",
]

#: where an error in a scheduler given as an argument points (``--scheduler``, the API's ``scheduler=``): not at the
#: sweep file's ``executor`` keys, which the user did not set (the CLI names the option)
SCHEDULER: tuple[str, ...] = ("scheduler",)
#: where an error in the sweep file's ``executor: {type: dask, address: ...}`` points
ADDRESS: tuple[str, ...] = ("executor", "address")


def parse_scheduler(spec: str, where: Sequence[str | int] = ADDRESS,
                    source: str | None = None) -> tuple[str, int | None]:
    """``"local:N"`` -> ``("local", N)``; an address (``tcp://host:8786``) -> ``(address, None)``.

    Raises
    ------
    ConfigError
        at ``where`` (default ``executor.address``) for a malformed ``local:N`` (``local:2x``, ``local:0``,
        ``local``) or an empty address.
    """
    if not isinstance(spec, str):
        raise ConfigError(where, f"must be text: tcp://host:port or local:N, got {spec!r}", source)
    spec = spec.strip()
    if spec == "local" or spec.startswith("local:"):  # not "localhost:8786", an address
        _, _, n = spec.partition(":")
        if not n.isdecimal() or int(n) < 1:
            raise ConfigError(where, f"'local:N' needs a whole number of workers N >= 1, got {spec!r}", source)
        return "local", int(n)
    if not spec:
        raise ConfigError(where, "empty scheduler address; give tcp://host:port or local:N", source)
    return spec, None


def _tcp_host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a TCP scheduler address (``tcp://host:port``, ``host:port``, ``[::1]:port``; Dask's
    default port 8786 when none is given), or ``None`` for another protocol (``tls://``, ``ucx://``, ...) or an
    address this cannot read (then Dask's own connection attempt reports it)."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme != "tcp":
        return None
    rest = rest.rstrip("/")
    if rest.startswith("["):  # IPv6: [::1]:8786
        host, _, tail = rest[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port_text = rest.partition(":")
    if not host or (port_text and not port_text.isdecimal()):
        return None
    return host, int(port_text) if port_text else 8786


def _dask_missing(where: Sequence[str | int], source: str | None, address: str) -> ConfigError | None:
    """The error for Dask distributed not being importable here (``None`` when it is)."""
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        how = ("leave out --scheduler" if tuple(where) == SCHEDULER else "set executor: {type: local}") + \
            " to run on local processes"
        return ConfigError(where, f"{address} runs on Dask, and Dask distributed cannot be imported here ({exc}): "
                           f"pip install 'onlineeval[dask]', or {how}", source)
    return None


#: seconds :func:`check_executor` waits for a TCP connection to a scheduler address
PROBE_TIMEOUT = 5.0


def check_executor(scheduler: str | None = None, workers: int | None = None,
                   spec: Mapping[str, Any] | None = None, source: str | None = None) -> None:
    """Refuse, before anything runs or is written, the backend :func:`~simulations.executors.make_executor`
    would fail to start: a malformed ``local:N`` or executor block, Dask distributed not importable, a TCP
    scheduler address that does not accept a connection within :data:`PROBE_TIMEOUT` seconds (a plain connect,
    closed at once; the scheduler may log it at INFO as a connection closed before its handshake). Starts
    nothing: a ``local:N`` cluster's start and a reachable scheduler's workers are still checked by
    :class:`~simulations.executors.DaskExecutor`.

    An error in ``scheduler`` (``--scheduler``) points at :data:`SCHEDULER`, one in ``spec`` (the sweep file's
    ``executor`` block, read from ``source``) at its key.

    Raises
    ------
    ConfigError
        naming the key (or argument), the value and what to do.
    """
    kind, address, where, src = _resolve(scheduler, workers, spec, source)
    if kind != "dask":
        return
    target, _n = parse_scheduler(address, where, src)
    missing = _dask_missing(where, src, address)
    if missing is not None:
        raise missing
    host_port = _tcp_host_port(target) if _n is None else None
    if host_port is not None:
        import socket

        try:
            with socket.create_connection(host_port, timeout=PROBE_TIMEOUT):
                pass
        except OSError as exc:
            raise ConfigError(where, f"cannot reach the Dask scheduler {target}: {exc.strerror or exc}", src) \
                from None


def _resolve(scheduler: str | None, workers: int | None, spec: Mapping[str, Any] | None,
             source: str | None) -> tuple[str, Any, tuple[str | int, ...], str | None]:
    """``("dask", address, where, source)`` or ``("local", workers, where, source)``: the backend
    :func:`~simulations.executors.make_executor` builds, where an error in it points and the file it came from
    (``None`` for an argument). Raises :class:`ConfigError` for a malformed executor block."""
    if scheduler is not None:
        return "dask", scheduler, SCHEDULER, None
    spec = dict(spec or {})
    kind = spec.get("type", "local")
    if kind == "dask":
        address = spec.get("address")
        if not isinstance(address, str):
            raise ConfigError(ADDRESS, "executor type dask needs an address: tcp://host:port or local:N", source)
        return "dask", address, ADDRESS, source
    if kind != "local":
        raise ConfigError(("executor", "type"), f"unknown executor {kind!r}; allowed: local, dask", source)
    n = workers if workers is not None else spec.get("workers", 0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(("executor", "workers"), f"must be a whole number >= 0 (0 = all cores), got {n!r}",
                          source if workers is None else None)
    return "local", n, ("executor", "workers"), source
