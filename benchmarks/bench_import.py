"""Cost of ``import onlineeval`` and ``import onlineeval.api``, each in a fresh process.

The Python API must stay cheap to import (issue 13): numpy, pandas, scipy.stats,
matplotlib, SimPy, typer and the simulator are imported by the calls that use them, not
at import. For each statement this prints the median wall time of a fresh interpreter
running it (minus the median of an empty interpreter, ``python -c pass``, measured in
the same alternating rounds), and which heavy modules ended up in ``sys.modules``
(none is the target); then the same for the first call that needs them
(``onlineeval.evaluate`` on a two-query dict), for scale, and a whole ``onlineeval power``
command (issue 11: well under a second; a 14-look O'Brien-Fleming design with size, power and
MDE) through the console script's entry point and through typer's app.

    python benchmarks/bench_import.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HEAVY = ("numpy", "pandas", "scipy", "scipy.stats", "matplotlib", "simpy", "typer", "simulations", "clickmodels")

STATEMENTS = {
    "python -c pass": "pass",
    "import onlineeval": "import onlineeval",
    "import onlineeval.api": "import onlineeval.api",
    "first onlineeval.evaluate call": (
        "import onlineeval; onlineeval.evaluate({'q': {'a': 1}}, {'q': {'a': 1.0}}, 'nDCG@10')"
    ),
    # issue 11: `onlineeval power` answers in well under a second, imports included; the console
    # script's entry point (onlineeval.cli:main, which parses plain options directly) and, for
    # comparison, the same command through typer's app
    "onlineeval power command": (
        "import sys; sys.argv = ['onlineeval', 'power', 'proportion', '--baseline', '0.1', '--target', '0.105', "
        "'--sequential', 'obrien_fleming', '--looks', '14', '--users', '100000']\n"
        "from onlineeval.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    ),
    "  the same through typer's app": (
        "import sys; sys.argv = ['onlineeval', 'power', 'proportion', '--baseline', '0.1', '--target', '0.105', "
        "'--sequential', 'obrien_fleming', '--looks', '14', '--users', '100000']\n"
        "from onlineeval.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass"
    ),
}


def _modules(code: str) -> list[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _time(code: str) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of a fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {k: [] for k in STATEMENTS}
    cpu: dict[str, list[float]] = {k: [] for k in STATEMENTS}
    load = os.getloadavg()
    for _ in range(args.repeats):  # alternating rounds: a drifting machine speed hits every statement alike
        for name, code in STATEMENTS.items():
            wall, used = _time(code)
            times[name].append(wall)
            cpu[name].append(used)
    base = statistics.median(times["python -c pass"])
    base_cpu = statistics.median(cpu["python -c pass"])
    print(f"load average before: {load[0]:.2f}, after: {os.getloadavg()[0]:.2f} "
          "(the CPU columns are the steadier on a busy machine)")  # fmt: skip
    head = f"{'statement':34s} {'median s':>9s} {'minus bare':>11s} {'CPU s':>7s} {'minus bare':>11s}"
    print(f"{head}  heavy modules imported")
    for name, code in STATEMENTS.items():
        med, med_cpu = statistics.median(times[name]), statistics.median(cpu[name])
        mods = ", ".join(_modules(code)) or "none"
        print(f"{name:34s} {med:9.3f} {med - base:11.3f} {med_cpu:7.3f} {med_cpu - base_cpu:11.3f}  {mods}")


if __name__ == "__main__":
    main()
