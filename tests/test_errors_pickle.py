"""User-facing errors survive a process boundary (the local executor's worker processes, Dask workers): pickled
and unpickled they keep their class, fields and message. Before, ConfigError's default pickling called the class
with its rendered message alone, and a ConfigError raised in a worker reached the caller as a BrokenProcessPool."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from onlineeval.errors import ConfigError, InputError, OutputError
from onlineeval.interleaving.validation.guard import CandidateError

ERRORS = [
    ConfigError(("designs", 0, "logger", "epsilon"), "must be in [0, 1], got 1.5"),
    ConfigError(("users",), "unknown key", source="configs/x.yaml"),
    ConfigError((), "no key"),
    InputError("bad line", "run.txt", 12),
    InputError("bad row", None, 3),
    InputError("plain"),
    OutputError("cannot write", "/tmp/out"),
    OutputError("disk full"),
    CandidateError("exception", "mine", "interleave([[1, 2], [2, 1]])", "raised KeyError(3)"),
]
FIELDS = ("key_path", "message", "source", "path", "line", "kind", "name", "call", "detail", "exit_code")


def _fields(e: Exception) -> dict[str, object]:
    return {f: getattr(e, f) for f in FIELDS if hasattr(e, f)}


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_pickle_with_their_fields(error: Exception) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and str(back) == str(error) and _fields(back) == _fields(error)


def _raise_config_error(_: int) -> None:
    raise ConfigError(("designs", 0, "logger"), "unknown logging policy 'greedy'")


def test_a_config_error_in_a_worker_process_reaches_the_caller_as_itself() -> None:
    with ProcessPoolExecutor(1) as pool:
        with pytest.raises(ConfigError) as info:
            pool.submit(_raise_config_error, 0).result(timeout=60)
    assert info.value.key_path == ("designs", 0, "logger") and "greedy" in info.value.message
