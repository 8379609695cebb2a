"""Cost of ``import onlineeval`` and ``import onlineeval.api``, each in a fresh process.

The Python API must stay cheap to import (issue 13): numpy, pandas, scipy.stats,
matplotlib, SimPy, typer and the simulator are imported by the calls that use them, not
at import. For each statement this prints the median wall time of a fresh interpreter
running it (minus the median of an empty interpreter, ``python -c pass``, measured in
the same alternating rounds), and which heavy modules ended up in ``sys.modules``
(none is the target); then the same for the first call that needs them
(``onlineeval.evaluate`` on a two-query dict), for scale, and a whole ``onlineeval power``
command (issue 11: well under a second).

    python benchmarks/bench_import.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
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
    # issue 11: `onlineeval power` answers in well under a second, imports included
    "onlineeval power command": (
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


def _time(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {k: [] for k in STATEMENTS}
    for _ in range(args.repeats):  # alternating rounds: a drifting machine speed hits every statement alike
        for name, code in STATEMENTS.items():
            times[name].append(_time(code))
    base = statistics.median(times["python -c pass"])
    print(f"{'statement':34s} {'median s':>9s} {'minus bare':>11s}  heavy modules imported")
    for name, code in STATEMENTS.items():
        med = statistics.median(times[name])
        mods = _modules(code)
        print(f"{name:34s} {med:9.3f} {med - base:11.3f}  {', '.join(mods) or 'none'}")


if __name__ == "__main__":
    main()
