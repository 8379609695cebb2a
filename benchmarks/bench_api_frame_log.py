"""The Python API reading a DataFrame log: on whole columns (pyarrow, ``onlineeval.io.logged_fast.frame_table`` /
``read_frame_fast``) against row by row (the records of its rows, ``logged_from_records``: the reference), and the
digest of the log (``onlineeval.io.digest.table_entry``) within the first.

The frame: ``--rows`` top-5 impressions over ``--queries`` queries of 20 candidates, clicked ids, users, and the
three propensity forms as ``p_list`` / ``p_prefix`` / ``p_item`` columns (lists). Both reads run in this process
on the same frame, alternated, ``--repeat`` times each (best kept), and give the same log (checked); printed: each
read's seconds and the ratio columns / rows, measured in the same run.

    python benchmarks/bench_api_frame_log.py [--rows 100000] [--queries 500] [--repeat 3] [--logger]

``--logger``: the frame's ``logger`` column holds each query's Plackett-Luce logger (a dict shared by the query's
rows) instead of the propensity columns; on whole columns is then
``onlineeval.io.logged_fast.read_logger_objects_fast`` (each query's logger decoded once, the other rows compared
with it), row by row the records (each logger object converted once).

Measured 2026-12-04 (2 cores): 10^5 rows, on whole columns 0.19 s, row by row 3.29 s (0.058); with the
repository's CI running beside it 0.31 s against 5.75 s. ``--logger`` (2026-12-04, after
``read_logger_objects_fast``): 1.39 s against 4.90 s (0.285); before it, row by row only, 6.0 s (each row's logger
converted on its own) and 4.4 s (each object once).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from _timing import fast_against_reference  # benchmarks/_timing.py (run as scripts from this folder)


def frame(rows: int, queries: int, seed: int = 0) -> pd.DataFrame:
    """``rows`` impressions with written propensities (valid: each prefix non-increasing, the item form at
    least the prefix's, the first slot's equal)."""
    rng = np.random.default_rng(seed)
    docs = np.array([f"d{j}" for j in range(20)], dtype=object)
    shown = docs[np.argsort(rng.random((rows, 20)), axis=1)[:, :5]]
    prefix = np.cumprod(rng.uniform(0.3, 1.0, (rows, 5)), axis=1)
    item = np.maximum(prefix, rng.uniform(0.3, 1.0, (rows, 5)))
    item[:, 0] = prefix[:, 0]
    clicked = rng.random((rows, 5)) < 0.2
    return pd.DataFrame({
        "query": [f"q{q}" for q in rng.integers(0, queries, rows)],
        "user": [f"u{u}" for u in rng.integers(0, rows // 10 + 1, rows)],
        "shown": [list(s) for s in shown],
        "clicks": [list(s[c]) for s, c in zip(shown, clicked)],
        "p_list": prefix[:, -1],
        "p_prefix": list(prefix),
        "p_item": list(item),
    })


def logger_frame(rows: int, queries: int, seed: int = 0) -> pd.DataFrame:
    """``rows`` impressions of 5 slots, each row's ``logger`` its query's Plackett-Luce logger over 20 scored
    candidates (one dict per query, shared by its rows, as a frame built from per-query objects holds them)."""
    rng = np.random.default_rng(seed)
    docs = [f"d{j}" for j in range(20)]
    loggers = [{"policy": "plackett_luce", "temperature": 1.0, "scores": dict(zip(docs, rng.normal(size=20).tolist()))}
               for _ in range(queries)]
    query = rng.integers(0, queries, rows)
    shown = np.asarray(docs, dtype=object)[np.argsort(rng.random((rows, 20)), axis=1)[:, :5]]
    clicked = rng.random((rows, 5)) < 0.2
    return pd.DataFrame({
        "query": [f"q{q}" for q in query],
        "user": [f"u{u}" for u in rng.integers(0, rows // 10 + 1, rows)],
        "shown": [list(s) for s in shown],
        "clicks": [list(s[c]) for s, c in zip(shown, clicked)],
        "logger": [loggers[q] for q in query],
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--logger", action="store_true",
                        help="a logger column of dicts instead of the propensity columns")
    args = parser.parse_args()

    import onlineeval.io.logged_fast as logged_fast
    import simulations.policies
    from onlineeval.api._estimate import _logged

    log = (logger_frame if args.logger else frame)(args.rows, args.queries)
    names = ("logger_frame_table",) if args.logger else ("frame_table",)
    best, logs = fast_against_reference(logged_fast, names, lambda: _logged(log, simulations.policies)[0],
                                        args.repeat, ("columns", "rows"))
    a, b = logs["columns"].data, logs["rows"].data
    fields = ("query", "shown", "clicks", "p_list", "p_prefix", "p_item", "user")
    for field in fields:
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    if args.logger:
        every = np.arange(len(logs["columns"].queries))
        np.testing.assert_array_equal(a.logger.item_position_marginals(every), b.logger.item_position_marginals(every))
    print(f"{args.rows:,} rows x 5 slots, {args.queries} queries{', loggers' if args.logger else ''} "
          f"(best of {args.repeat}):")
    print(f"  on whole columns (pyarrow, with the digest)   {best['columns']:.3f} s")
    print(f"  row by row (the records, with their digest)   {best['rows']:.3f} s")
    print(f"  columns / rows                                {best['columns'] / best['rows']:.3f}")


if __name__ == "__main__":
    main()
