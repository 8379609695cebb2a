"""One onlineeval run per results folder: :func:`folder_lock` (an exclusive ``flock`` on :data:`LOCK` in the folder),
which processes forked while it is held let go of (:func:`_drop_locks_in_child`, review 15 F1), and whose refusal
names a live holder or the processes a dead run left behind (:func:`lock_holders`). Moved from
:mod:`simulations.job`, which re-exports these names."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from onlineeval.errors import OutputError

__all__ = ["LOCK", "folder_lock", "lock_holders"]

LOCK = ".onlineeval.lock"

#: descriptors of the folder locks this process holds; a forked child lets go of them (:func:`_drop_locks_in_child`)
_LOCK_FDS: set[int] = set()


def _drop_locks_in_child() -> None:
    """In a child just forked (a pool's worker, a sweep's writer): point the inherited descriptors of the folder
    locks at ``/dev/null``. An ``flock`` belongs to the open file, which every forked child shares: a worker left
    behind by a killed run (``kill -9``, the OOM killer) kept the folder locked, and every resume was refused
    (review 15, F1). ``dup2`` rather than ``close``: the number stays taken, so the inherited file object cannot
    close some other file that would reuse it."""
    if not _LOCK_FDS:
        return
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for fd in list(_LOCK_FDS):
        with contextlib.suppress(OSError):
            os.dup2(null, fd)
    os.close(null)
    _LOCK_FDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_locks_in_child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def lock_holders(path: Path) -> list[int]:
    """The processes with ``path`` open (Linux: from ``/proc/*/fd``; empty where that cannot be read)."""
    target = os.path.realpath(path)
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdecimal() or int(entry) == os.getpid():
            continue
        fd_dir = f"/proc/{entry}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") == target:
                    found.append(int(entry))
                    break
            except OSError:
                continue
    return sorted(found)


def _in_use_message(path: Path, holder: str) -> str:
    """Why the lock at ``path`` cannot be taken: another live run, or processes left behind by a dead one."""
    pid = int(holder) if holder.isdecimal() else None
    if pid is None or _alive(pid):
        return (f"results folder is in use by another onlineeval run (pid {holder}); wait for it to finish "
                "or choose another --output")
    others = [p for p in lock_holders(path) if p != pid]
    if others:
        shown = " ".join(str(p) for p in others)
        return (f"results folder is locked, but the run that locked it (pid {pid}) is no longer running: "
                f"process(es) it left behind (pid {shown}) still hold {path}. Its finished replicates are kept; "
                f"end those processes (kill {shown}) and run again to resume")
    return (f"results folder is locked, but the run that locked it (pid {pid}) is no longer running: a process it "
            f"left behind still holds {path} (`fuser {path}` lists it). Its finished replicates are kept; end that "
            "process and run again to resume")


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` for the block (one run per results folder). Processes forked inside
    the block do not hold it (:func:`_drop_locks_in_child`); when the lock is taken, the error says whether its
    holder is a live run or processes left behind by a dead one (with their pids)."""
    import fcntl

    path = folder / LOCK
    fh = open(path, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise OutputError(_in_use_message(path, holder), str(folder)) from None
        _LOCK_FDS.add(fh.fileno())
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        _LOCK_FDS.discard(fh.fileno())
        # unlock before closing: processes forked while the lock was held by an onlineeval before review 15's F1
        # fix shared this open file, and closing ours alone would have left it locked
        with contextlib.suppress(OSError):
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        fh.close()
