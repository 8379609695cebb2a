"""Review 12, F8: a sweep whose backend cannot start (a malformed ``local:N``, Dask distributed not importable, a
scheduler address that refuses connections) is refused before anything is created (no lock, no point folders, no
partial files), and the error names what the user gave: ``--scheduler`` (the library's ``scheduler`` argument),
a ``--set`` key, or the sweep file's ``executor`` keys, never ``executor.type`` for a ``--scheduler``.

Both branches of the import check run whether or not Dask is installed here: the missing branch by making
``import distributed`` fail (``sys.modules["distributed"] = None``), the present one only where it is installed.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.errors import ConfigError
from simulations.executor_check import SCHEDULER, check_executor
from simulations.executors import DaskExecutor, LocalExecutor, make_executor
from simulations.sweep import run_sweep, sweep_from_mapping
from tests.test_sweep import BASE

TINY: dict[str, Any] = {**BASE, "replicates": 2, "traffic": {**BASE["traffic"], "days": 1},
                        "analysis": {**BASE["analysis"], "truth_impressions": 1000}}


def tiny_sweep(out: Path, **extra: Any):
    return sweep_from_mapping({"base": TINY, "points": [{"rankers.B.noise": 0.8}], "output": str(out), **extra},
                              source="sweep.yaml")


@pytest.fixture
def closed_port() -> int:
    """A local TCP port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A local TCP port that accepts connections (what the probe needs from a scheduler)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        yield int(s.getsockname()[1])


@pytest.fixture
def no_dask(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` raises ImportError


def assert_nothing_created(out: Path) -> None:
    assert not out.exists(), sorted(str(p) for p in out.rglob("*"))


@pytest.mark.parametrize("spec", ["local:2x", "local:0", "local", ""])
def test_malformed_local_n_is_refused_before_anything_exists(tmp_path: Path, spec: str) -> None:
    out = tmp_path / "sweep"
    with pytest.raises(ConfigError) as info:
        run_sweep(tiny_sweep(out), scheduler=spec)
    assert info.value.key_path == SCHEDULER and info.value.source is None
    assert_nothing_created(out)


def test_malformed_local_n_wins_over_a_missing_dask(tmp_path: Path, no_dask: None) -> None:
    """The review's case: 'local:2x' without Dask was blamed on Dask (and on executor.type)."""
    with pytest.raises(ConfigError, match="'local:N' needs a whole number of workers N >= 1, got 'local:2x'"):
        check_executor("local:2x")
    with pytest.raises(ConfigError) as info:
        DaskExecutor("local:2x")
    assert info.value.key_path == ("executor", "address") and "got 'local:2x'" in info.value.message


def test_missing_dask_is_refused_before_anything_exists(tmp_path: Path, no_dask: None) -> None:
    out = tmp_path / "sweep"
    with pytest.raises(ConfigError) as info:
        run_sweep(tiny_sweep(out), scheduler="local:2")
    assert info.value.key_path == SCHEDULER
    assert "pip install 'onlineeval[dask]'" in info.value.message and "leave out --scheduler" in info.value.message
    assert_nothing_created(out)
    # the sweep file's executor block: its key and file
    with pytest.raises(ConfigError) as info:
        run_sweep(tiny_sweep(out, executor={"type": "dask", "address": "local:2"}))
    assert info.value.key_path == ("executor", "address") and info.value.source == "sweep.yaml"
    assert "set executor: {type: local}" in info.value.message
    assert_nothing_created(out)
    # the executor itself says the same (not executor.type)
    with pytest.raises(ConfigError) as info:
        make_executor("local:2")
    assert info.value.key_path == SCHEDULER and "cannot be imported" in info.value.message


def test_unreachable_scheduler_is_refused_before_anything_exists(tmp_path: Path, closed_port: int) -> None:
    out = tmp_path / "sweep"
    for address in (f"tcp://127.0.0.1:{closed_port}", f"127.0.0.1:{closed_port}"):
        with pytest.raises(ConfigError) as info:
            run_sweep(tiny_sweep(out), scheduler=address)
        assert info.value.key_path == SCHEDULER
        assert info.value.message.startswith(f"cannot reach the Dask scheduler {address}: ")
        assert_nothing_created(out)


def test_check_passes_a_listening_address_and_local_n_without_starting_anything(listening_port: int) -> None:
    """The Dask-installed branch: the check connects to a listening port and returns; ``local:N`` starts no
    cluster (no thread, no child process)."""
    import multiprocessing

    threads = threading.active_count()
    check_executor(f"tcp://127.0.0.1:{listening_port}")
    check_executor("local:2")
    check_executor(None, None, {"type": "dask", "address": f"127.0.0.1:{listening_port}"})
    assert threading.active_count() == threads and multiprocessing.active_children() == []


def test_local_backends_need_no_dask(no_dask: None) -> None:
    check_executor()
    check_executor(None, 2, {"type": "local", "workers": 3})
    assert isinstance(make_executor(None, 1, None), LocalExecutor)
    with pytest.raises(ConfigError) as info:
        check_executor(None, None, {"type": "ray"}, "sweep.yaml")
    assert info.value.key_path == ("executor", "type") and info.value.source == "sweep.yaml"


def test_a_finished_sweep_reads_back_without_its_backend(tmp_path: Path, closed_port: int) -> None:
    """The check guards only work still to run: a finished sweep is read back whatever the scheduler; with
    ``fresh`` (everything to run again) the unreachable scheduler is refused and the finished folder is kept."""
    out = tmp_path / "sweep"
    first = run_sweep(tiny_sweep(out), workers=1)
    assert first.computed == [0]
    listing = sorted(p.relative_to(out) for p in out.rglob("*"))
    again = run_sweep(tiny_sweep(out), scheduler=f"tcp://127.0.0.1:{closed_port}")
    assert again.computed == [] and again.rows.equals(first.rows)
    with pytest.raises(ConfigError) as info:
        run_sweep(tiny_sweep(out), scheduler=f"tcp://127.0.0.1:{closed_port}", fresh=True)
    assert info.value.key_path == SCHEDULER
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == listing


def _sweep_file(tmp_path: Path) -> Path:
    import yaml

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": TINY, "points": [{"rankers.B.noise": 0.8}]}))
    return path


def test_cli_names_the_option_and_creates_nothing(tmp_path: Path, no_dask: None) -> None:
    config, out = _sweep_file(tmp_path), tmp_path / "out"
    runner = CliRunner()
    res = runner.invoke(app, ["sweep", "-c", str(config), "-o", str(out), "--scheduler", "local:2x"])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr == "error: --scheduler: 'local:N' needs a whole number of workers N >= 1, got 'local:2x'\n"
    res = runner.invoke(app, ["sweep", "-c", str(config), "-o", str(out), "--scheduler", "local:2"])
    assert res.exit_code == 2
    assert res.stderr.startswith("error: --scheduler: local:2 runs on Dask, and Dask distributed cannot be imported")
    assert "executor.type" not in res.stderr
    res = runner.invoke(app, ["sweep", "-c", str(config), "-o", str(out), "--set", "executor.type=dask",
                              "--set", "executor.address=local:2x"])
    assert res.exit_code == 2
    assert res.stderr == (f"error: {config}: executor.address: 'local:N' needs a whole number of workers N >= 1, "
                          "got 'local:2x' (given by --set executor.address, not the file)\n")
    assert_nothing_created(out)
